// Runs every registered SBP case and checks that every op has at least one.

#include <set>

#include "testing.h"

namespace tessera::testing {
namespace {

TEST(SbpSweep, EveryCasePasses) {
  ASSERT_FALSE(sbp_cases().empty());
  for (const SbpCase& sbp_case : sbp_cases()) {
    SCOPED_TRACE(sbp_case.op);
    EXPECT_TRUE(check_sbp(sbp_case.op, sbp_case.inputs(), sbp_case.attrs, sbp_case.rtol,
                          sbp_case.atol));
  }
}

TEST(SbpSweep, EveryOpHasACase) {
  std::set<std::string> covered;
  for (const SbpCase& sbp_case : sbp_cases()) covered.insert(sbp_case.op);
  std::string missing;
  for (const OpDef* op : all_ops()) {
    // The local <-> global conversions are the layouts themselves: the
    // boxing and autograd modes of global_worker cover them. A global
    // tensor does not change device (to_device refuses it). send and recv
    // need a peer: global_worker's collective_grads mode runs them.
    const bool exempt = op->name == "to_device" || op->name == "send" || op->name == "recv";
    if (!covered.count(op->name) && !op->global_only && !exempt) {
      missing += " " + op->name;
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops without an SBP test case:" << missing;
}

}  // namespace
}  // namespace tessera::testing
