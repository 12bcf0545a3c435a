#include "tessera/ops/layout_attrs.h"

namespace tessera {

void set_layout_attrs(Attrs& attrs, const Placement& placement, const NdSbp& sbp) {
  attrs.set("device", static_cast<int64_t>(placement.device_type()));
  attrs.set("ranks", std::vector<int64_t>(placement.ranks().begin(), placement.ranks().end()));
  attrs.set("mesh", placement.mesh());
  std::vector<int64_t> sbps;
  for (const Sbp& one : sbp.sbps()) {
    sbps.push_back(static_cast<int64_t>(one.kind));
    sbps.push_back(one.axis);
  }
  attrs.set("sbp", sbps);
}

bool has_layout_attrs(const Attrs& attrs) {
  return attrs.has("sbp");
}

void erase_layout_attrs(Attrs& attrs) {
  attrs.erase("device").erase("ranks").erase("mesh").erase("sbp");
}

Placement placement_attr(const Attrs& attrs) {
  const std::vector<int64_t>& ranks = attrs.ints("ranks");
  return Placement(static_cast<DeviceType>(attrs.i("device")),
                   std::vector<int>(ranks.begin(), ranks.end()), attrs.ints("mesh"));
}

NdSbp sbp_attr(const Attrs& attrs) {
  const std::vector<int64_t>& codes = attrs.ints("sbp");
  std::vector<Sbp> sbps;
  for (size_t i = 0; i + 1 < codes.size(); i += 2) {
    sbps.push_back(Sbp{static_cast<SbpKind>(codes[i]), codes[i + 1]});
  }
  return NdSbp(sbps);
}

}  // namespace tessera
