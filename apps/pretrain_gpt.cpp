// pretrain_gpt: the training binary (port of Megatron-LM's pretrain_gpt.py entry point); the
// program itself is training/pretrain_gpt_main.h.
#include "training/pretrain_gpt_main.h"

int main(int argc, char** argv) { return mindspeed::pretrain_gpt_main(argc, argv); }
