#include "cli/predict.hpp"

int main(int argc, char** argv) { return vbagg::cli::predict_main(argc, argv); }
