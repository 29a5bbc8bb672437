//===- TestFiles.h - whole-file helpers of the unit tests -------*- C++ -*-===//

#ifndef AUTOPAR_TEST_UNIT_TESTFILES_H
#define AUTOPAR_TEST_UNIT_TESTFILES_H

#include <fstream>
#include <sstream>
#include <string>

namespace autopar::test {

/// The bytes of `path` ("" when it cannot be read).
inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces `path` with `bytes`.
inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

} // namespace autopar::test

#endif // AUTOPAR_TEST_UNIT_TESTFILES_H
