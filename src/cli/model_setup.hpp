// From a resolved configuration and a built dataset to what the core fits: the unit split,
// standardisation, model spec, kernel and optimiser settings.
#pragma once

#include <string>
#include <vector>

#include "config.hpp"
#include "core/fit.hpp"
#include "core/standardize.hpp"
#include "io/build_dataset.hpp"
#include "settings.hpp"

namespace vbagg::cli {

struct Split {
  std::vector<Index> train, holdout;  // bag indices of the dataset
};

// Seeded split of the dataset's bags; at least one training bag, holdout rounded to the nearest bag.
Split split_units(Index bags, double holdout_fraction, unsigned long long seed);
// The same for each source of a joint dataset on its own, so every source is held out in proportion
// and keeps training units (for one source: split_units(data.num_bags(), ...)). Bags without an
// observation are in neither part.
Split split_units(const Dataset& data, double holdout_fraction, unsigned long long seed);
// The same from each unit's source (what every process of an MPI job knows of every unit); a unit
// of source -1 is in neither part.
Split split_units(const std::vector<int>& sources, double holdout_fraction, unsigned long long seed);
// The split with every unit of the listed periods (train.holdout.periods, data.time's form) moved
// to the holdout; `built` holds every unit (its units[k].period). Throws ConfigError for a period
// that data.time does not list, or when no training unit would be left.
Split hold_out_periods(Split split, const io::BuiltData& built, const std::string& periods);

ModelSpec model_spec(const Settings& settings);
Kernel model_kernel(const Settings& settings, Index covariates, Index coordinates, const io::TimeAxis& time = {});
// model.kernel.space_prior's priors on the space part of `kernel`, centred on the data: the
// variance of the first source's training units' log rates (logits of a survey's prevalence) left
// after a least-squares fit on their mean covariates, and a quarter of the diagonal of the box
// around every unit's pixels (held-out units, units without counts and other sources included;
// an MPI job's processes pool their extremes). None without a space part, when switched off, or
// by default with data.time.
ModelSpec::KernelPrior space_kernel_prior(const Settings& settings, const io::BuiltData& built, const Kernel& kernel,
                                          const std::vector<Index>& train);
// train.optimizer auto: full-batch L-BFGS up to this many training pixels (an objective pass
// then costs well under a second, and L-BFGS needs the fewest passes), natural-gradient
// minibatch steps above it.
constexpr Index kFullBatchPixels = 200000;
Optimizer choose_optimizer(const Settings& settings, Index training_pixels);
// model.inducing.count, or with 0 (auto) one inducing point per three training units of the source
// with the most, at least 32 and at most 200: bag data resolve the map no finer than the units,
// sources that observe the same field resolve it no finer than the densest of them (provinces over
// the districts add no detail), and an objective pass costs M^2 per pixel, so a small problem should
// not pay for a continent's M.
// `units` are every unit of the build (BuiltData::units), `train` the training units' places in it.
Index inducing_count(const Settings& settings, const std::vector<io::UnitSummary>& units,
                     const std::vector<Index>& train);
// train.epochs when 0 (auto): for an L-BFGS fit of several periods kSpaceTimeEpochsBeforePolish
// when the polish follows and 1500 when it does not; for one of one period kEpochsBeforePolish
// when the polish follows; 1000 for an adam or natgrad fit of several tasks; else 300.
constexpr int kSpaceTimeEpochsBeforePolish = 400;
constexpr int kEpochsBeforePolish = 100;
int default_epochs(const Settings& settings, Optimizer optimizer);
// train.polish when auto: kAutoPolish evaluations, or the fit's epochs if fewer, after an L-BFGS
// fit of a variational model, where the polish was measured (docs/experiments.md, "The polish
// after L-BFGS" for one period, "A shorter L-BFGS, then the polish" for several, "The polish for
// several sources"); else none. L-BFGS over q's entries and the rest together stopped at its
// budget far from the optimum where the counts pin the field, with intervals up to twice too wide.
constexpr int kAutoPolish = 300;
int default_polish(const Settings& settings, Optimizer optimizer, int epochs);
// train.schedule, or with auto anneal for a fit of several tasks and constant otherwise.
Schedule default_schedule(const Settings& settings);
FitOptions fit_options(const Settings& settings, int threads, Index training_pixels);
// Threads from train.threads (0: every core), overridden by a positive --threads.
int thread_count(const Settings& settings, int cli_threads);

// Throws ConfigError when writing any of `outputs` (file names) into out_dir would overwrite one
// of the configuration's input files.
void refuse_overwriting_inputs(const std::string& out_dir, const std::vector<std::string>& outputs,
                               const io::DataConfig& data);

// Maps unit ids to dataset bag indices; unknown ids are skipped.
std::vector<Index> bags_of(const Dataset& data, const std::vector<std::string>& ids);

}  // namespace vbagg::cli
