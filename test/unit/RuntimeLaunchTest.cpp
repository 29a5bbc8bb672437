//===- RuntimeLaunchTest.cpp - runtime/comm/Launch.h -----------------------===//

#include "runtime/comm/Launch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

using autopar::rt::LaunchInfo;
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
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.worldSize, 8);
  EXPECT_EQ(info.localRank, 1);

  EXPECT_EQ(launch({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}, info), "");
  EXPECT_EQ(info.launcher, "MPICH (PMI)");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.localRank, 2); // no MPI_LOCALRANKID: one node

  EXPECT_EQ(launch({{"SLURM_PROCID", "9"},
                    {"SLURM_NTASKS", "16"},
                    {"SLURM_LOCALID", "1"}},
                   info),
            "");
  EXPECT_EQ(info.launcher, "Slurm");
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

} // namespace
