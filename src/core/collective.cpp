#include "collective.hpp"

namespace vbagg {

namespace {

class OneProcess final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void reduce_sum(double*, Index) const override {}
  void reduce_max(double*, Index) const override {}
};

}  // namespace

const Collective& one_process() {
  static const OneProcess p;
  return p;
}

}  // namespace vbagg
