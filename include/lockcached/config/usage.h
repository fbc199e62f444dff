// `lockcached --help`: lockcached's own flags first, in groups, then
// memcached's options and a pointer to the rest (glog's and gflags' flags,
// which --helpfull lists).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lockcached::config {

struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;  // gflags names, in the order shown
};

// The help text: `intro`, then each group's flags with their description
// and default (as gflags knows them, or as `descriptions` says for flags
// that are not lockcached's own, such as glog's --v), then `outro`.
std::string usage_text(const std::string& intro, const std::vector<FlagGroup>& groups,
                       const std::string& outro,
                       const std::map<std::string, std::string>& descriptions = {});

}  // namespace lockcached::config
