//===- AccelerateConfigTest.cpp - accelerate's YAML as PyYAML reads it ----===//

#include "compiler/plan/AccelerateConfig.h"

#include <gtest/gtest.h>

using nlohmann::json;
using namespace autopar;

namespace {

json yaml(const std::string &text) {
  json value;
  std::string error;
  EXPECT_TRUE(parseYaml(text, "c.yaml", value, error)) << error;
  return value;
}

std::string yamlError(const std::string &text) {
  json value;
  std::string error;
  EXPECT_FALSE(parseYaml(text, "c.yaml", value, error));
  return error;
}

// Plain scalars as PyYAML's safe_load resolves them (YAML 1.1); quoted
// ones stay strings.
TEST(AccelerateConfigTest, ScalarsResolveAsPyYaml) {
  json v = yaml("a: no\nb: 'no'\nc: yes\nd: Off\ne: ~\nf:\ng: 8\nh: -3\n"
                "i: 1.0\nj: 1.5e-05\nk: 1e-5\nl: 0x10\nm: bf16\nn: \"8\"\n"
                "o: 1_000\np: .5\n");
  EXPECT_EQ(v["a"], false);
  EXPECT_EQ(v["b"], "no");
  EXPECT_EQ(v["c"], true);
  EXPECT_EQ(v["d"], false);
  EXPECT_TRUE(v["e"].is_null());
  EXPECT_TRUE(v["f"].is_null());
  EXPECT_TRUE(v["g"].is_number_integer());
  EXPECT_EQ(v["g"], 8);
  EXPECT_EQ(v["h"], -3);
  EXPECT_TRUE(v["i"].is_number_float());
  EXPECT_EQ(v["i"], 1.0);
  EXPECT_EQ(v["j"], 1.5e-05);
  EXPECT_EQ(v["k"], "1e-5"); // PyYAML's floats need a dot
  EXPECT_EQ(v["l"], "0x10"); // hex is not read as a number here
  EXPECT_EQ(v["m"], "bf16");
  EXPECT_EQ(v["n"], "8");
  EXPECT_EQ(v["o"], 1000);
  EXPECT_EQ(v["p"], 0.5);
  EXPECT_EQ(yaml("l: [1, x, {y: 2}]\n")["l"],
            json::parse(R"([1, "x", {"y": 2}])"));
}

TEST(AccelerateConfigTest, BadYamlIsOneLine) {
  EXPECT_EQ(yamlError("a: 1\na: 2\n"), "c.yaml: a: duplicate key");
  EXPECT_EQ(yamlError("a: [1\n"),
            "c.yaml:2:1: invalid YAML: end of sequence flow not found");
  std::string nested = "a: ";
  for (int k = 0; k < 70; ++k)
    nested += "[";
  for (int k = 0; k < 70; ++k)
    nested += "]";
  EXPECT_EQ(yamlError(nested + "\n"),
            "c.yaml: a[0][0][0][0][0][0][0][0][0][0][...: nested deeper than "
            "64 levels");
  // Nine levels of ten aliases: a billion values.
  std::string laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int k = 1; k < 10; ++k) {
    std::string prev = "*l" + std::to_string(k - 1);
    laughs += "l" + std::to_string(k) + ": &l" + std::to_string(k) + " [";
    for (int j = 0; j < 10; ++j)
      laughs += (j ? ", " : "") + prev;
    laughs += "]\n";
  }
  EXPECT_EQ(yamlError(laughs),
            "c.yaml: more than 1000000 values (aliases expanded)");
}

TEST(AccelerateConfigTest, PathsByExtension) {
  EXPECT_TRUE(isAccelerateConfigPath("default_config.yaml"));
  EXPECT_TRUE(isAccelerateConfigPath("a/b.yml"));
  EXPECT_FALSE(isAccelerateConfigPath("ds.json"));
  EXPECT_FALSE(isAccelerateConfigPath(".yaml"));
}

} // namespace
