#pragma once

namespace vbagg::cli {
int eval_main(int argc, char** argv);
}
