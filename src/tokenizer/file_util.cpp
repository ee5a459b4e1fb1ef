// File reading and message quoting for the tokenizers (see file_util.h).
#include "tokenizer/file_util.h"

#include <fstream>
#include <sstream>
#include <system_error>

namespace mindspeed {

StatusOr<std::string> read_text_file(const std::filesystem::path& path, std::string_view what) {
  const std::string name = str_cat(what, what.empty() ? "" : " ", "'", path.string(), "'");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return invalid_argument(name, " is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(name, ": cannot open it (does the file exist?)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return data_loss(name, ": read error");
  return buffer.str();
}

std::string quote_for_message(std::string_view s, size_t max_bytes) {
  std::string out = "\"";
  if (s.size() <= max_bytes) {
    out.append(s);
  } else {
    size_t cut = max_bytes;
    // Back up over continuation bytes so that no UTF-8 sequence is split.
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    out.append(s.substr(0, cut));
    out.append("...");
  }
  out.push_back('"');
  return out;
}

}  // namespace mindspeed
