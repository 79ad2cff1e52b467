#pragma once

namespace vbagg::cli {
int train_main(int argc, char** argv);
}
