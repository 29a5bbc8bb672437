//===- Profile.cpp - optional per-op timing of generated code -------------===//

#include "runtime/Profile.h"

#ifdef AUTOPAR_PROFILE
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace autopar::rt {
namespace {
/// Totals per op kind, printed when the program exits.
class Profile {
public:
  ~Profile() {
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (auto &[name, entry] : entries) {
      rows.push_back({entry.first, name});
      total += entry.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "profile: %.3f s in generated ops\n", total);
    for (auto &[seconds, name] : rows)
      std::fprintf(stderr, "  %-32s %9.3f s %5.1f%% %8ld calls\n", name.c_str(),
                   seconds, 100 * seconds / total, entries[name].second);
  }
  void record(const char *name, double seconds) {
    auto &entry = entries[name];
    entry.first += seconds;
    ++entry.second;
  }

private:
  std::map<std::string, std::pair<double, long>> entries;
};
} // namespace

void profileRecord(const char *name, double seconds) {
  static Profile profile;
  profile.record(name, seconds);
}
} // namespace autopar::rt
#endif
