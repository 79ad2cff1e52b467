#include "cli/train.hpp"

int main(int argc, char** argv) { return vbagg::cli::train_main(argc, argv); }
