// The one description of a model's free parameter vector. Counting, packing, unpacking, names and
// the packing of a gradient all walk this list of blocks, so a new parameter is one new block.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace vbagg {

enum class ParamBlockId {
  q_mean,
  q_chol,
  mean,
  task_means,
  linear_mean,
  kernel,
  mixing,
  likelihood,
  unit_effect,
  inducing
};

struct ParamBlock {
  ParamBlockId id;
  // Number of entries for this model (0 when the block is absent).
  Index (*size)(const Model&);
  // Writes the block's entries of theta / reads them back.
  void (*pack)(const Model&, double* out);
  void (*unpack)(Model&, const double* in);
  // Appends one name per entry.
  void (*names)(const Model&, std::vector<std::string>& out);
  // Writes the gradient with respect to the packed entries (e.g. d/d log L_jj for the diagonal).
  void (*pack_gradient)(const Model&, const ModelGradient&, double* out);
};

// The blocks in the order of the parameter vector. q(v) comes first, so natural-gradient steps
// own a leading slice.
const std::vector<ParamBlock>& param_blocks();

// Offset and size of one block within Model::pack() for this model.
struct ParamSlice {
  Index offset = 0, size = 0;
};
ParamSlice param_slice(const Model& model, ParamBlockId id);

// The parameters a staged fit holds at their start in its first stage (FitOptions::staged): the
// likelihood's when it asks for that (BagLikelihood::fit_parameters_later) and the unit effect.
// They are adjacent in the layout, so this is one slice (empty when there are none).
ParamSlice staged_slice(const Model& model);

// Zeroes the entries of an ELBO gradient that press a parameter held at its floor further down
// (each unit effect's log sigma_u at kUnitLogSdFloor). Below the floor the objective does not
// change, so this is its gradient there; it lets Adam's momentum die out and keeps L-BFGS's
// line searches consistent.
void drop_gradient_past_floor(const Model& model, Vector& grad);

// Where source s's entries sit within the likelihood block (its likelihood parameters) and the
// unit-effect block (its log sigma_u, when it has a unit effect).
Index source_likelihood_offset(const Model& model, Index s);
Index source_unit_effect_offset(const Model& model, Index s);

}  // namespace vbagg
