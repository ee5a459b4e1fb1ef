// Small helpers shared by the tokenizers that load files (gpt2_tokenization, hf_tokenizer):
// reading a whole file with a message naming it, and quoting a token or line in a message
// (quote_for_message; not `quoted`, which argument-dependent lookup confuses with std::quoted).
// Internal to src/tokenizer.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace mindspeed {

/// The bytes of the file at `path`. `what` ("vocab file", ...; may be empty) starts every
/// message, followed by the quoted path: a directory is InvalidArgument, a file that cannot
/// be opened NotFound, a read error DataLoss.
StatusOr<std::string> read_text_file(const std::filesystem::path& path, std::string_view what);

/// `s` in double quotes for a message: at most `max_bytes` of it (cut at a code-point
/// boundary, so valid UTF-8 stays valid), then "..." when it was cut.
std::string quote_for_message(std::string_view s, size_t max_bytes = 100);

}  // namespace mindspeed
