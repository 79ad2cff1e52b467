// Built only by the Layering test, which expects it not to compile: core's include path must
// not reach io's headers.
#include "io/grid.hpp"
