// pretrain_gpt: the training binary (port of Megatron-LM's pretrain_gpt.py entry point); the
// program itself is training/pretrain_gpt_main.h, and with --auto-settings the layout planner
// (auto_settings/auto_settings.h, MindSpeed's Auto Settings).
#include "auto_settings/auto_settings.h"
#include "training/pretrain_gpt_main.h"

int main(int argc, char** argv) {
  if (mindspeed::wants_auto_settings(argc, argv)) return mindspeed::auto_settings_main(argc, argv);
  return mindspeed::pretrain_gpt_main(argc, argv);
}
