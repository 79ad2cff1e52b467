// vbagg-simulate as library calls: each writes one kind of synthetic data set into a folder.
#pragma once

#include <string>

#include "core/country.hpp"
#include "core/swissroll.hpp"

namespace vbagg::cli {

// Covariate and population GeoTIFFs, units.gpkg with case counts and a prevalence survey (tested,
// positive), provinces.gpkg (coarser units with counts of their own), clusters.gpkg (survey
// clusters as points), truth_intensity.tif and truth_prevalence.tif, and the configurations to
// train on them: data.yaml (counts), prevalence.yaml (the binomial model), counts.yaml (units and
// provinces jointly) and survey.yaml (clusters and the units' survey jointly).
void simulate_country(const std::string& dir, const CountryOptions& options);
// pixels.csv and bags.csv of the swiss-roll bag problem.
void simulate_swissroll(const std::string& dir, const SwissRollOptions& options);

int simulate_main(int argc, char** argv);

}  // namespace vbagg::cli
