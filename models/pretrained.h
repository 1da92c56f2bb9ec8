// A published model's weights for pplab's Llama (no LibTorch here): which
// tensor of a Hugging Face safetensors folder is which parameter, and the
// check of a whole folder against a config before any worker starts.
//
// pplab's parameter names are Hugging Face's without the "model." prefix
// ("layers.3.mlp.up_proj.weight" is "model.layers.3.mlp.up_proj.weight";
// "lm_head.weight" is the same in both), and its tensors have the same
// layout (Linear weights out x in, the rotate-half rotary convention), so a
// tensor is copied as it is, widened to fp32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/safetensors.h"

namespace pplab {

// Hugging Face's name of pplab's parameter `name`.
std::string HuggingFaceName(const std::string& name);

struct ParameterShape {
  std::string name;  // pplab's global name
  std::vector<int64_t> shape;
};

// Every parameter of the whole model `c`, by pplab's global name, in the
// order the stages create them (a tied head is listed too: each pipeline
// keeps it).
std::vector<ParameterShape> LlamaParameterShapes(const LlamaConfig& c);

// The tensor of `files` that holds pplab's parameter `name`: its Hugging
// Face name, or for a tied head without one, the embedding. Throws
// pplab::Error naming the folder and the tensor when it is missing.
const SafetensorsTensor& PretrainedTensor(const WeightFiles& files, const LlamaConfig& c, const std::string& name);

// Checks `files` against the model `c`, reading headers only: every
// parameter there with its shape and a dtype pplab reads (F32, BF16, F16);
// no tensor the model lacks (a file of another depth or width), besides the
// rotary frequencies some older files keep; and a rotary scaling pplab
// computes. Throws pplab::Error with one line naming the file and the
// tensor. Returns the number of values the model takes from the files.
int64_t CheckPretrained(const WeightFiles& files, const LlamaConfig& c);

}  // namespace pplab
