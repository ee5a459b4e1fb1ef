// Configs: every validated setting of a run, split by concern (model, parallel, optimizer,
// training, data, logging). Built once from the command line (cli/arguments.h), validated
// (validate.h), then passed by const reference.
#pragma once

#include "config/auto_settings_config.h"
#include "config/data_config.h"
#include "config/logging_config.h"
#include "config/model_config.h"
#include "config/optimizer_config.h"
#include "config/parallel_config.h"
#include "config/training_config.h"

namespace mindspeed {

struct Configs {
  ModelConfig model;
  ParallelConfig parallel;
  OptimizerConfig optimizer;
  TrainingConfig training;
  DataConfig data;
  LoggingConfig logging;
  AutoSettingsConfig auto_settings;
};

}  // namespace mindspeed
