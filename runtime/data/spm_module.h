// The C interface of pplab's SentencePiece module (libpplab_spm.so).
//
// Why a module: Debian's libsentencepiece carries its own copy of
// protobuf-lite and exports its symbols, which clash with the libprotobuf
// that LibTorch loads (the process crashes while starting). The tokenizer
// therefore dlopen()s this module with RTLD_LOCAL | RTLD_DEEPBIND, so
// SentencePiece binds to its own protobuf and nothing else sees it. Only C
// types cross the boundary, which also keeps it free of C++ ABI flags.
#pragma once

#include <stddef.h>
#include <stdint.h>

// pplab_spm_train's vocabularies of this many pieces or more hold the 256
// byte pieces (byte fallback); smaller ones map unseen bytes to UNK.
enum { kByteFallbackVocab = 1024 };

extern "C" {

// Every function returns 0 on success; otherwise a message is written into
// `error` (at most `error_size` bytes, NUL-terminated).

// Loads a serialized model. *handle must be freed with pplab_spm_free.
int pplab_spm_load(const char* model, size_t model_size, void** handle, char* error, size_t error_size);
void pplab_spm_free(void* handle);
// Piece count, and the ids of BOS and EOS (-1 when absent) and of the piece
// that pads: PAD, or UNK where the model has no PAD (as Llama 2's has none).
void pplab_spm_info(void* handle, int* pieces, int* pad, int* bos, int* eos);
// Encodes `text`; *ids (malloc'ed, to free with pplab_spm_free_buffer) gets
// *count ids.
int pplab_spm_encode(void* handle, const char* text, size_t size, int32_t** ids, size_t* count, char* error,
                     size_t error_size);
// Decodes `count` ids; *text (malloc'ed) gets *size bytes.
int pplab_spm_decode(void* handle, const int32_t* ids, size_t count, char** text, size_t* size, char* error,
                     size_t error_size);
// The vocabulary piece of `id` ("\xe2\x96\x81world", "<0x0A>", "<s>"); *text
// (malloc'ed) gets *size bytes. An id out of range is an error.
int pplab_spm_piece(void* handle, int32_t id, char** text, size_t* size, char* error, size_t error_size);
// Trains a BPE model of `vocab_size` pieces on the non-empty lines of `text`
// (byte fallback from 1024 pieces); *model (malloc'ed) gets the serialized
// model. Its special pieces: with `llama2_ids` 0, pplab's (PAD 0, UNK 1,
// BOS 2, EOS 3); else Llama 2's (UNK 0, BOS 1, EOS 2, no PAD).
int pplab_spm_train(const char* text, size_t size, int vocab_size, int llama2_ids, char** model, size_t* model_size,
                    char* error, size_t error_size);
void pplab_spm_free_buffer(void* buffer);
}
