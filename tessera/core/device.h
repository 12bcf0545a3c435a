#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class DeviceType : uint8_t { cpu, cuda };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline std::string device_str(Device device) {
  return device.type == DeviceType::cpu ? std::string("cpu")
                                        : "cuda:" + std::to_string(device.index);
}

}  // namespace tessera
