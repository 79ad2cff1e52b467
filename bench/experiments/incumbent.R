# R disaggregation's model (Nandi et al. 2023: linear fixed effects, an SPDE Matern field and an iid
# polygon effect, fitted by TMB's Laplace approximation) on a vbagg-simulate country, with the same
# training units as a vbagg fit, written so that incumbent.sh scores both alike:
#   Rscript incumbent.R DATA_DIR TRAIN_IDS HOLDOUT_IDS OUT_DIR [DRAWS]
# DATA_DIR is vbagg-simulate's output (units.gpkg with ID and cases, the four covariate GeoTIFFs,
# population.tif); TRAIN_IDS and HOLDOUT_IDS are files of unit ids, one per line. Writes to OUT_DIR:
#   mean.tif       the rate's posterior mean at each pixel (the mean of DRAWS joint draws)
#   quantiles.tif  its quantiles at 0.025 0.05 0.1 0.15 0.2 0.25 0.75 0.8 0.85 0.9 0.95 0.975
#   holdout.csv    per held-out unit: id, observed count, predictive mean, and whether each central
#                  50-95 % predictive interval covers the count (joint draws of the parameters and
#                  the field, a new polygon's iid effect from its fitted sd, then Poisson noise)
#   fit.txt        seconds to prepare, fit and draw; the fitted parameters
# The covariates are standardised first (as vbagg does), so the package's N(0, 0.5) prior on each
# slope is on the same scale as vbagg's. Needs the disaggregation package and its dependencies.
suppressPackageStartupMessages({
  library(disaggregation)
  library(terra)
  library(sf)
})
args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 4) stop("usage: Rscript incumbent.R DATA_DIR TRAIN_IDS HOLDOUT_IDS OUT_DIR [DRAWS]")
data_dir <- args[1]
train_ids <- readLines(args[2])
holdout_ids <- readLines(args[3])
out <- args[4]
draws <- if (length(args) >= 5) as.integer(args[5]) else 500L
dir.create(out, showWarnings = FALSE, recursive = TRUE)
set.seed(1)

units <- st_read(file.path(data_dir, "units.gpkg"), quiet = TRUE)
names_cov <- c("temperature", "rainfall", "night_lights", "travel_time")
covariates <- rast(file.path(data_dir, paste0(names_cov, ".tif")))
names(covariates) <- names_cov
for (k in seq_len(nlyr(covariates))) {
  v <- values(covariates[[k]], mat = FALSE)
  values(covariates[[k]]) <- (v - mean(v, na.rm = TRUE)) / sd(v, na.rm = TRUE)
}
population <- rast(file.path(data_dir, "population.tif"))
train <- units[units$ID %in% train_ids, ]
heldout <- units[units$ID %in% holdout_ids, ]

t0 <- Sys.time()
# na_action: the lake's pixels have no covariates and nobody living there.
data <- prepare_data(train, covariates, population, id_var = "ID", response_var = "cases", na_action = TRUE)
t1 <- Sys.time()
fit <- disag_model(data, family = "poisson", link = "log", field = TRUE, iid = TRUE, silent = TRUE)
t2 <- Sys.time()

# Joint draws of every parameter from the Laplace approximation, as predict_uncertainty draws them.
parameters <- fit$obj$env$last.par.best
chol_prec <- Matrix::Cholesky(fit$sd_out$jointPrecision)
par_draws <- sparseMVN::rmvn.sparse(draws, parameters, chol_prec, prec = TRUE)
objects <- disaggregation:::setup_objects(fit)
rates <- vector("list", draws)
iid_sd <- numeric(draws)
for (r in seq_len(draws)) {
  p <- split(par_draws[r, ], names(parameters))
  rates[[r]] <- disaggregation:::predict_single_raster(p, objects, link_function = "log")$prediction
  iid_sd[r] <- 1 / sqrt(exp(p$iideffect_log_tau))
}
rates <- rast(rates)
t3 <- Sys.time()

levels <- c(0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975)
writeRaster(mean(rates), file.path(out, "mean.tif"), overwrite = TRUE)
quantiles <- app(rates, function(x) stats::quantile(x, probs = levels, na.rm = TRUE, names = FALSE))
writeRaster(quantiles, file.path(out, "quantiles.tif"), overwrite = TRUE)

# A held-out unit's predictive count: its pixels' people times each draw's rate, a new polygon's
# iid effect N(0, sd^2) of that draw, then Poisson noise.
cells <- terra::extract(population, vect(heldout), cells = TRUE, ID = TRUE)
rate_values <- values(rates, mat = TRUE)
coverage_levels <- c(0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
rows <- lapply(seq_len(nrow(heldout)), function(a) {
  mine <- cells[cells$ID == a, ]
  people <- ifelse(is.na(mine[[2]]), 0, mine[[2]])
  total <- colSums(people * rate_values[mine$cell, , drop = FALSE], na.rm = TRUE)
  count <- stats::rpois(draws, total * exp(stats::rnorm(draws, 0, iid_sd)))
  y <- heldout$cases[a]
  covered <- sapply(coverage_levels, function(l) {
    q <- stats::quantile(count, c((1 - l) / 2, (1 + l) / 2), names = FALSE, type = 1)
    as.integer(y >= q[1] && y <= q[2])
  })
  c(list(id = heldout$ID[a], observed = y, predicted = mean(count)), as.list(setNames(covered, paste0("covered_", coverage_levels))))
})
write.csv(do.call(rbind.data.frame, rows), file.path(out, "holdout.csv"), row.names = FALSE)

report <- summary(fit$sd_out, "fixed")
writeLines(c(sprintf("prepare_s %.2f", as.numeric(t1 - t0, units = "secs")),
             sprintf("fit_s %.2f", as.numeric(t2 - t1, units = "secs")),
             sprintf("draw_s %.2f", as.numeric(t3 - t2, units = "secs")),
             sprintf("mesh_nodes %d", fit$data$mesh$n),
             sprintf("%s %.4f %.4f", rownames(report), report[, 1], report[, 2])),
           file.path(out, "fit.txt"))
