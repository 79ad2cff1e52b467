#include "cli/eval.hpp"

int main(int argc, char** argv) { return vbagg::cli::eval_main(argc, argv); }
