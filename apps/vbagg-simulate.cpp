#include "cli/simulate.hpp"

int main(int argc, char** argv) { return vbagg::cli::simulate_main(argc, argv); }
