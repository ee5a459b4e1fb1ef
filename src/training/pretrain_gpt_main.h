// The pretrain_gpt program (port of Megatron-LM's pretrain_gpt.py entry point) as a
// function, so that apps/pretrain_gpt.cpp is one line and tests can run the same program
// with PretrainHooks (fault injection). Exit-code contract: 0 success; 2 usage or
// validation error (found before anything is built, every rank agreeing; rank 0 prints
// it); any later failure on any rank aborts the whole job with "[rank R] FATAL: <what>".
#pragma once

#include "training/pretrain.h"

namespace mindspeed {

int pretrain_gpt_main(int argc, char** argv, const PretrainHooks& hooks = {});

}  // namespace mindspeed
