// An independent reader of TensorBoard event files for the tests: it shares no code with
// src/training/summary_writer.cpp. CRC-32C is computed bit by bit (the writer uses a table),
// the protobuf wire format is walked generically (any field order, unknown fields skipped,
// every wire type), and every frame's length and data checksums are verified.
// Format: TFRecord frames (uint64 length, uint32 masked CRC-32C of the 8 length bytes, data,
// uint32 masked CRC-32C of the data) holding tensorboard.Event messages.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace mindspeed::testing {

/// CRC-32C, one bit at a time (polynomial 0x1EDC6F41, reflected 0x82F63B78).
inline uint32_t crc32c_bitwise(const uint8_t* data, size_t size) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline uint32_t tfrecord_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

struct TbEvent {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<std::pair<std::string, float>> values;  // (tag, simple_value)
};

struct TbFile {
  std::vector<TbEvent> events;
  std::string error;  // empty when the whole file is valid
};

namespace tb_detail {

// A protobuf field: number, wire type and payload.
struct Field {
  int number = 0;
  int wire_type = 0;
  uint64_t varint = 0;     // wire type 0
  uint64_t fixed64 = 0;    // wire type 1
  uint32_t fixed32 = 0;    // wire type 5
  std::string bytes;       // wire type 2
};

inline bool read_varint(const std::string& s, size_t& at, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= s.size()) return false;
    const uint8_t b = static_cast<uint8_t>(s[at++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

inline uint64_t load_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + static_cast<size_t>(i)]);
  return v;
}

// All fields of a message, or nullopt if it is malformed.
inline std::optional<std::vector<Field>> parse_message(const std::string& s) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < s.size()) {
    uint64_t key = 0;
    if (!read_varint(s, at, &key)) return std::nullopt;
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.number == 0) return std::nullopt;
    switch (f.wire_type) {
      case 0:
        if (!read_varint(s, at, &f.varint)) return std::nullopt;
        break;
      case 1:
        if (at + 8 > s.size()) return std::nullopt;
        f.fixed64 = load_le(s, at, 8);
        at += 8;
        break;
      case 2: {
        uint64_t n = 0;
        if (!read_varint(s, at, &n) || n > s.size() - at) return std::nullopt;
        f.bytes = s.substr(at, n);
        at += n;
        break;
      }
      case 5:
        if (at + 4 > s.size()) return std::nullopt;
        f.fixed32 = static_cast<uint32_t>(load_le(s, at, 4));
        at += 4;
        break;
      default:
        return std::nullopt;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

inline std::optional<TbEvent> parse_event(const std::string& data, std::string* error) {
  const auto fields = parse_message(data);
  if (!fields) {
    *error = "malformed Event message";
    return std::nullopt;
  }
  TbEvent e;
  for (const Field& f : *fields) {
    if (f.number == 1 && f.wire_type == 1) {
      std::memcpy(&e.wall_time, &f.fixed64, 8);
    } else if (f.number == 2 && f.wire_type == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire_type == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.wire_type == 2) {
      e.has_summary = true;
      const auto summary = parse_message(f.bytes);
      if (!summary) {
        *error = "malformed Summary message";
        return std::nullopt;
      }
      for (const Field& v : *summary) {
        if (v.number != 1 || v.wire_type != 2) continue;
        const auto value = parse_message(v.bytes);
        if (!value) {
          *error = "malformed Summary.Value message";
          return std::nullopt;
        }
        std::string tag;
        std::optional<float> simple;
        for (const Field& x : *value) {
          if (x.number == 1 && x.wire_type == 2) tag = x.bytes;
          if (x.number == 2 && x.wire_type == 5) {
            float fv;
            std::memcpy(&fv, &x.fixed32, 4);
            simple = fv;
          }
        }
        if (!simple) {
          *error = "Summary.Value '" + tag + "' has no simple_value";
          return std::nullopt;
        }
        e.values.emplace_back(tag, *simple);
      }
    } else {
      *error = "unexpected Event field " + std::to_string(f.number) + " (wire type " + std::to_string(f.wire_type) + ")";
      return std::nullopt;
    }
  }
  return e;
}

}  // namespace tb_detail

/// Reads every record of an event file; stops at the first framing or checksum error.
inline TbFile read_event_file(const std::string& path) {
  TbFile out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.error = "cannot open " + path;
    return out;
  }
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  while (at < s.size()) {
    if (s.size() - at < 12) {
      out.error = "truncated record header at byte " + std::to_string(at);
      return out;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(s.data() + at);
    const uint64_t length = tb_detail::load_le(s, at, 8);
    const uint32_t length_crc = static_cast<uint32_t>(tb_detail::load_le(s, at + 8, 4));
    if (tfrecord_mask(crc32c_bitwise(p, 8)) != length_crc) {
      out.error = "length checksum mismatch at byte " + std::to_string(at);
      return out;
    }
    if (length > s.size() - at - 12 || s.size() - at - 12 - length < 4) {
      out.error = "truncated record at byte " + std::to_string(at);
      return out;
    }
    const std::string data = s.substr(at + 12, length);
    const uint32_t data_crc = static_cast<uint32_t>(tb_detail::load_le(s, at + 12 + length, 4));
    if (tfrecord_mask(crc32c_bitwise(reinterpret_cast<const uint8_t*>(data.data()), data.size())) != data_crc) {
      out.error = "data checksum mismatch at byte " + std::to_string(at);
      return out;
    }
    auto event = tb_detail::parse_event(data, &out.error);
    if (!event) return out;
    out.events.push_back(std::move(*event));
    at += 12 + length + 4;
  }
  return out;
}

/// One scalar series: (step, value) in file order.
inline std::vector<std::pair<int64_t, float>> scalar_series(const TbFile& file, const std::string& tag) {
  std::vector<std::pair<int64_t, float>> series;
  for (const TbEvent& e : file.events) {
    for (const auto& [t, v] : e.values) {
      if (t == tag) series.emplace_back(e.step, v);
    }
  }
  return series;
}

}  // namespace mindspeed::testing
