// vbagg-train under mpirun, started as a user would: the model of K processes against one
// process's, a process that dies or fails alone, and the apps that run in one process only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../cli/run.hpp"
#include "io/model_file.hpp"

namespace vbagg {
namespace {

namespace fs = std::filesystem;

// Open MPI's launcher, oversubscribed (3 processes on any machine) and allowed as root (CI
// containers). Open MPI keeps state in components it unloads before exit, which LeakSanitizer
// reports from unknown modules: the sanitizer build checks the processes of an MPI job for
// everything but leaks (the same code in one process is leak-checked by the other tests).
std::string launcher() {
  return std::string("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 ") +
         VBAGG_MPIRUN + " --oversubscribe ";
}

std::string mpirun(int processes) { return launcher() + "-np " + std::to_string(processes) + " "; }

std::string train_command(const std::string& out, const std::string& extra = "") {
  return test::bin("vbagg-train") + " --config " + VBAGG_SOURCE_DIR + "/config/example.yaml --out " + out +
         " -q --threads 1 --set train.epochs=4 " + extra;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("vbagg_mpirun_" + name);
  fs::remove_all(dir);
  return dir;
}

// L-BFGS (the optimizer `auto` picks for the example), with the point estimates' spread, and Adam
// with held-out early stopping.
TEST(Mpirun, TrainMatchesOneProcess) {
  const fs::path dir = scratch("train");
  // L-BFGS without its polish: the polish's steps of size 1 on q carry the processes' different
  // summation order into the last digits over many steps (1e-7 after a fit's worth); a few of them
  // keep 1e-10 (Distributed.FitMatchesOneProcess). Adam's runs skip the spread: it is the same code
  // after either optimizer, and most of a 4-epoch run's time (24 of 31 s under the sanitizers).
  for (const std::string optimizer : {"lbfgs", "adam"}) {
    const std::string settings = "--set train.optimizer=" + optimizer +
                                 " --set train.patience=20 --set train.polish=0" +
                                 (optimizer == "adam" ? " --set model.point_uncertainty=none" : "");
    const fs::path one_dir = dir / (optimizer + "_one");
    const test::RunResult one = test::run(train_command(one_dir.string(), settings));
    ASSERT_EQ(0, one.code) << one.output;
    const io::ModelFile reference = io::read_model_file((one_dir / "model.yaml").string());
    for (int k : {2, 3}) {
      const fs::path out = dir / (optimizer + std::to_string(k));
      const test::RunResult r = test::run(mpirun(k) + train_command(out.string(), settings));
      ASSERT_EQ(0, r.code) << r.output;
      const io::ModelFile f = io::read_model_file((out / "model.yaml").string());
      const Vector a = f.model.pack(), b = reference.model.pack();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_LT((a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff(), 1e-10) << optimizer << ", " << k;
      EXPECT_EQ(f.train_units, reference.train_units);
      EXPECT_EQ(f.holdout_units, reference.holdout_units);
      EXPECT_EQ(f.training.epochs, reference.training.epochs);
      EXPECT_NEAR(f.training.elbo, reference.training.elbo, 1e-10 * std::abs(reference.training.elbo));
      if (optimizer == "adam") {
        EXPECT_NEAR(f.training.best_holdout_nll, reference.training.best_holdout_nll,
                    1e-10 * std::abs(reference.training.best_holdout_nll));
        EXPECT_EQ(f.model.spread.directions(), 0);
      } else {
        // The spread's Hessian comes from differences of gradients, which magnify the summation
        // order's last digits: 1e-7 relative between 1 and 2 or 3 processes.
        const PointSpread &s = f.model.spread, &s1 = reference.model.spread;
        ASSERT_GT(s1.directions(), 0);
        ASSERT_EQ(s.sd.size(), s1.sd.size());
        EXPECT_LT(((s.sd - s1.sd).array() / s1.sd.array()).abs().maxCoeff(), 1e-5) << k;
        EXPECT_LT((s.field - s1.field).cwiseAbs().maxCoeff(), 1e-5) << k;
      }
    }
  }
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The processes take turns at the strips and the units; the leading one writes: the same files,
// byte for byte (units.gpkg records its write time, so its rows are compared through units.csv).
// One process with whole-grid strips, whose units come in one batch, writes the same units.csv.
TEST(Mpirun, PredictWritesTheSameFilesAsOneProcess) {
  const fs::path dir = scratch("predict");
  ASSERT_EQ(0, test::run(train_command((dir / "train").string())).code);
  const std::string model = (dir / "train/model.yaml").string();
  // Strips of a few rows, so that every process predicts several and the units come in batches.
  const std::string predict = test::bin("vbagg-predict") + " --model " + model + " -q --threads 1 ";
  const std::string strips = predict + "--set predict.strip_rows=7 --out ";
  const test::RunResult one = test::run(strips + (dir / "one").string());
  ASSERT_EQ(0, one.code) << one.output;
  for (int k : {1, 2, 3}) {
    const fs::path out = dir / ("k" + std::to_string(k));
    const test::RunResult r = test::run(k == 1 ? predict + "--set predict.strip_rows=100000 --out " + out.string()
                                               : mpirun(k) + strips + out.string());
    ASSERT_EQ(0, r.code) << r.output;
    int compared = 0;
    for (const auto& entry : fs::directory_iterator(dir / "one")) {
      const fs::path name = entry.path().filename();
      ASSERT_TRUE(fs::exists(out / name)) << name;
      // Maps of other strips are laid out otherwise in their files: the whole-strip run's units only.
      if (name.extension() == ".gpkg" || (k == 1 && name != "units.csv")) continue;
      EXPECT_EQ(file_bytes(entry.path()), file_bytes(out / name)) << name << ", " << k << " processes";
      ++compared;
    }
    EXPECT_GE(compared, k == 1 ? 1 : 10);
  }
}

// A space-time model's maps (a band per period) and spans over processes: the same files as one
// process writes, byte for byte.
TEST(Mpirun, SpaceTimeMapsAndSpansAreTheSameAsOneProcess) {
  const fs::path dir = scratch("space_time");
  const std::string data = (dir / "data").string();
  ASSERT_EQ(0, test::run(test::bin("vbagg-simulate") + " --kind country --out " + data +
                         " --size 30x24 --units 8 --months 4 -q")
                   .code);
  const std::string model = (dir / "train/model.yaml").string();
  const test::RunResult trained =
      test::run(test::bin("vbagg-train") + " --config " + data + "/seasonal.yaml --out " + (dir / "train").string() +
                " -q --threads 1 --set train.epochs=5 --set model.inducing.count=16");
  ASSERT_EQ(0, trained.code) << trained.output;
  const std::string predict = test::bin("vbagg-predict") + " --model " + model +
                              " -q --threads 1 --style none --set predict.strip_rows=5 --span 2019-01..2019-04 --out ";
  ASSERT_EQ(0, test::run(predict + (dir / "one").string()).code);
  const test::RunResult r = test::run(mpirun(3) + predict + (dir / "three").string());
  ASSERT_EQ(0, r.code) << r.output;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(dir / "one")) {
    const fs::path name = entry.path().filename();
    if (name.extension() == ".gpkg") continue;
    EXPECT_EQ(file_bytes(entry.path()), file_bytes(dir / "three" / name)) << name;
    ++compared;
  }
  EXPECT_GE(compared, 10);  // seven maps, three of the span, units.csv
}

// A space-time fit whose units' periods share their effect, by Adam on minibatches of whole
// units: two processes give one process's model.
TEST(Mpirun, SpaceTimeTrainingMatchesOneProcess) {
  const fs::path dir = scratch("space_time_train");
  const std::string data = (dir / "data").string();
  ASSERT_EQ(0, test::run(test::bin("vbagg-simulate") + " --kind country --out " + data +
                         " --size 30x24 --units 8 --months 4 --seed 3 -q")
                   .code);
  auto train = [&](const std::string& launcher, const std::string& out) {
    return test::run(launcher + test::bin("vbagg-train") + " --config " + data + "/seasonal.yaml --out " +
                     (dir / out).string() +
                     " -q --threads 1 --set train.optimizer=adam --set train.epochs=6 --set train.batch_bags=10 "
                     "--set model.inducing.count=16");
  };
  const test::RunResult one = train("", "one");
  ASSERT_EQ(0, one.code) << one.output;
  const test::RunResult two = train(mpirun(2), "two");
  ASSERT_EQ(0, two.code) << two.output;
  const io::ModelFile a = io::read_model_file((dir / "one/model.yaml").string());
  const io::ModelFile b = io::read_model_file((dir / "two/model.yaml").string());
  EXPECT_TRUE(a.model.spec.unit_effect_shared);
  const Vector pa = a.model.pack(), pb = b.model.pack();
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_LT((pa - pb).cwiseAbs().maxCoeff() / pa.cwiseAbs().maxCoeff(), 1e-10);
  EXPECT_NEAR(a.training.elbo, b.training.elbo, 1e-10 * std::abs(a.training.elbo));
}

// A process killed in the middle of training (as by the kernel's OOM killer) ends the job: no
// hang, a non-zero exit, and no model.
TEST(Mpirun, AProcessKilledAloneEndsTheJobWithoutAModel) {
  const fs::path out = scratch("killed");
  const std::string cmd =
      mpirun(1) + train_command(out.string()) + " : -np 1 env VBAGG_FAULT=epoch:2 " + train_command(out.string());
  const test::RunResult r = test::run("timeout 120 " + cmd);
  EXPECT_NE(0, r.code) << r.output;
  EXPECT_NE(124, r.code) << "the job hung: " << r.output;
  EXPECT_NE(std::string::npos, r.output.find("exited on signal 9")) << r.output;
  EXPECT_FALSE(fs::exists(out / "model.yaml"));
}

// An error that one process raises alone ends every process, with the error named.
TEST(Mpirun, AnErrorOnOneProcessEndsTheJob) {
  const fs::path out = scratch("error");
  const std::string cmd =
      mpirun(1) + train_command(out.string()) + " : -np 1 " + train_command(out.string(), "--set train.epochs=-1");
  const test::RunResult r = test::run("timeout 120 " + cmd);
  EXPECT_EQ(2, r.code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("error (process 1 of 2)")) << r.output;
  EXPECT_FALSE(fs::exists(out / "model.yaml"));
}

TEST(Mpirun, OneProcessAppsRefuseSeveral) {
  const test::RunResult r = test::run("timeout 60 " + mpirun(2) + test::bin("vbagg-simulate") +
                                      " --kind country --out " + scratch("sim").string());
  EXPECT_EQ(2, r.code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("vbagg-simulate runs in one process")) << r.output;
}

}  // namespace
}  // namespace vbagg
