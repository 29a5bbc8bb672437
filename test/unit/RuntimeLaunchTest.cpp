//===- RuntimeLaunchTest.cpp - runtime/comm/Launch.h -----------------------===//

#include "runtime/comm/Launch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using autopar::rt::Endpoint;
using autopar::rt::LaunchInfo;
using autopar::rt::readEndpoint;
using autopar::rt::readLaunchInfo;

namespace {

/// The environment the test's getenv sees.
std::map<std::string, std::string> env;

const char *fakeGetenv(const char *name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

/// readLaunchInfo under `vars`: its error, and `info`.
std::string launch(std::map<std::string, std::string> vars, LaunchInfo &info) {
  env = std::move(vars);
  return readLaunchInfo(info, fakeGetenv);
}

TEST(RuntimeLaunchTest, NoLauncherIsOneProcess) {
  LaunchInfo info;
  EXPECT_EQ(launch({{"PATH", "/bin"}}, info), "");
  EXPECT_EQ(info.launcher, "");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.worldSize, 1);
  EXPECT_EQ(info.localRank, 0);
}

TEST(RuntimeLaunchTest, EachLauncher) {
  LaunchInfo info;
  EXPECT_EQ(launch({{"OMPI_COMM_WORLD_RANK", "5"},
                    {"OMPI_COMM_WORLD_SIZE", "8"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "Open MPI");
  EXPECT_TRUE(info.byMpi);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.worldSize, 8);
  EXPECT_EQ(info.localRank, 1);

  EXPECT_EQ(launch({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}, info), "");
  EXPECT_EQ(info.launcher, "MPICH (PMI)");
  EXPECT_TRUE(info.byMpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.localRank, 2); // no MPI_LOCALRANKID: one node

  EXPECT_EQ(launch({{"SLURM_PROCID", "9"},
                    {"SLURM_NTASKS", "16"},
                    {"SLURM_LOCALID", "1"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_FALSE(info.byMpi);
  EXPECT_EQ(info.rank, 9);
  EXPECT_EQ(info.worldSize, 16);
  EXPECT_EQ(info.localRank, 1);

  EXPECT_EQ(launch({{"RANK", "3"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_RANK", "3"},
                    {"MASTER_ADDR", "node0"},
                    {"MASTER_PORT", "29500"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.worldSize, 4);
  EXPECT_EQ(info.localRank, 3);
}

TEST(RuntimeLaunchTest, WorldSizeAlone) {
  // A world size without a rank is rank 0 of it (what a program without MPI
  // needs to refuse the launch).
  LaunchInfo info;
  EXPECT_EQ(launch({{"PMI_SIZE", "2"}}, info), "");
  EXPECT_EQ(info.launcher, "MPICH (PMI)");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.worldSize, 2);
}

TEST(RuntimeLaunchTest, MpiBeforeSlurmBeforeTorchrun) {
  // mpirun inside a Slurm allocation: the MPI world, not the allocation's.
  LaunchInfo info;
  EXPECT_EQ(launch({{"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "32"},
                    {"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"RANK", "7"},
                    {"WORLD_SIZE", "8"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "Open MPI");
  EXPECT_EQ(info.worldSize, 2);
  EXPECT_EQ(launch({{"SLURM_PROCID", "4"},
                    {"SLURM_NTASKS", "32"},
                    {"RANK", "7"},
                    {"WORLD_SIZE", "8"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_EQ(info.rank, 4);
}

TEST(RuntimeLaunchTest, Errors) {
  LaunchInfo info;
  EXPECT_EQ(launch({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}}, info),
            "the launcher's SLURM_PROCID is 'x', not an integer >= 0");
  EXPECT_EQ(launch({{"WORLD_SIZE", "0"}, {"RANK", "0"}}, info),
            "the launcher's WORLD_SIZE is '0', not an integer >= 1");
  EXPECT_EQ(launch({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, info),
            "the launcher's RANK is 4, outside its world of 4 (WORLD_SIZE)");
  // A rank without a world size: a world of one, which it is outside.
  EXPECT_EQ(launch({{"RANK", "1"}}, info),
            "the launcher's RANK is 1, outside its world of 1 (WORLD_SIZE)");
  EXPECT_EQ(launch({{"OMPI_COMM_WORLD_RANK", "0"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}},
                   info),
            "the launcher's OMPI_COMM_WORLD_LOCAL_RANK is '-1', not an "
            "integer >= 0");
  EXPECT_EQ(launch({{"PMI_RANK", "0"}, {"PMI_SIZE", "99999999999"}}, info),
            "the launcher's PMI_SIZE is '99999999999', not an integer >= 1");
  EXPECT_EQ(info.launcher, ""); // a failed read leaves the default
}

/// readEndpoint under `vars`: its error, `e` and whether one was found.
std::string endpoint(std::map<std::string, std::string> vars, Endpoint &e,
                     bool &found) {
  env = std::move(vars);
  return readEndpoint(e, found, fakeGetenv);
}

TEST(RuntimeLaunchTest, Endpoints) {
  Endpoint e;
  bool found = true;
  EXPECT_EQ(endpoint({{"RANK", "0"}}, e, found), "");
  EXPECT_FALSE(found);

  EXPECT_EQ(
      endpoint({{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}}, e, found),
      "");
  EXPECT_TRUE(found);
  EXPECT_EQ(e.text(), "node7:29500");
  EXPECT_EQ(e.source, "MASTER_ADDR, MASTER_PORT");

  // torchrun's agent store listens on MASTER_PORT: the ranks meet one up.
  EXPECT_EQ(endpoint({{"MASTER_ADDR", "10.0.0.1"},
                      {"MASTER_PORT", "29500"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
                     e, found),
            "");
  EXPECT_EQ(e.text(), "10.0.0.1:29501");
  EXPECT_EQ(e.source,
            "MASTER_ADDR, MASTER_PORT + 1 (torchrun's agent store holds "
            "MASTER_PORT)");
  EXPECT_EQ(endpoint({{"MASTER_ADDR", "10.0.0.1"},
                      {"MASTER_PORT", "29500"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "False"}},
                     e, found),
            "");
  EXPECT_EQ(e.port, 29500);

  // IPv6, bare or in brackets.
  EXPECT_EQ(
      endpoint({{"MASTER_ADDR", "[fe80::1]"}, {"MASTER_PORT", "80"}}, e, found),
      "");
  EXPECT_EQ(e.host, "fe80::1");
  EXPECT_EQ(e.text(), "[fe80::1]:80");
}

TEST(RuntimeLaunchTest, EndpointErrors) {
  Endpoint e;
  bool found = true;
  EXPECT_EQ(endpoint({{"MASTER_PORT", "29500"}}, e, found),
            "MASTER_PORT is set but MASTER_ADDR is not (rank 0's host)");
  EXPECT_FALSE(found);
  EXPECT_EQ(endpoint({{"MASTER_ADDR", "node0"}}, e, found),
            "MASTER_ADDR is set but MASTER_PORT is not (a free TCP port on "
            "rank 0's host)");
  EXPECT_EQ(
      endpoint({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "0"}}, e, found),
      "MASTER_PORT is '0', not a TCP port (1 to 65535)");
  EXPECT_EQ(
      endpoint({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "65536"}}, e, found),
      "MASTER_PORT is '65536', not a TCP port (1 to 65535)");
  EXPECT_EQ(
      endpoint({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29x"}}, e, found),
      "MASTER_PORT is '29x', not a TCP port (1 to 65535)");
  EXPECT_EQ(endpoint({{"MASTER_ADDR", "tcp://node0"}, {"MASTER_PORT", "1"}}, e,
                     found),
            "MASTER_ADDR is 'tcp://node0', not a host name or address");
  EXPECT_EQ(endpoint({{"MASTER_ADDR", "node0"},
                      {"MASTER_PORT", "65535"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}},
                     e, found),
            "MASTER_PORT is 65535: under torchrun's agent the ranks meet on "
            "MASTER_PORT + 1, which is no TCP port");
  EXPECT_FALSE(found);
}

} // namespace
