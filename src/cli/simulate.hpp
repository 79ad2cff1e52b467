#pragma once

namespace vbagg::cli {
int simulate_main(int argc, char** argv);
}
