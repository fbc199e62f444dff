#include "lockcached/config/usage.h"

#include <gflags/gflags.h>

namespace lockcached::config {
namespace {

// Wraps `text` at about 76 columns, each line indented by `indent`.
std::string wrapped(const std::string& text, const std::string& indent) {
  constexpr size_t kWidth = 76;
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > kWidth) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string describe(const std::string& name, const std::map<std::string, std::string>& descriptions) {
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) return "";
  std::string spelled = "  --" + name;
  if (info.type == "string") {
    spelled += "=\"" + info.default_value + "\"";
  } else {
    spelled += "=" + info.default_value;
  }
  auto own = descriptions.find(name);
  return spelled + "\n" +
         wrapped(own == descriptions.end() ? info.description : own->second, "      ");
}

}  // namespace

std::string usage_text(const std::string& intro, const std::vector<FlagGroup>& groups,
                       const std::string& outro,
                       const std::map<std::string, std::string>& descriptions) {
  std::string text = intro + "\n";
  for (const FlagGroup& group : groups) {
    text += "\n" + group.title + ":\n";
    for (const std::string& flag : group.flags)
      text += describe(flag, descriptions);
  }
  return text + "\n" + outro;
}

}  // namespace lockcached::config
