#pragma once

#include <cstdint>
#include <string>

namespace tessera {

// `meta`: tensors with shape, dtype and (for global ones) placement and SBP
// but no storage, on which ops run their inference and SBP rules only
// (tracing, planning); reading their data is an error.
enum class DeviceType : uint8_t { cpu, cuda, meta };
constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  static constexpr Device meta() { return Device{DeviceType::meta, 0}; }
};

inline std::string device_str(Device device) {
  switch (device.type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::meta:
      return "meta";
    case DeviceType::cuda:
      break;
  }
  return "cuda:" + std::to_string(device.index);
}

}  // namespace tessera
