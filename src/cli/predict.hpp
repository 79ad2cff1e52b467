#pragma once

namespace vbagg::cli {
int predict_main(int argc, char** argv);
}
