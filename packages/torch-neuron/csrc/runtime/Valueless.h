// Device storages that carry no values (shape-only execution, aten/ShapeOnly.h).
//
// A valueless storage holds memory from the caching allocator that no kernel wrote: its
// tensors read as zeros, or as the constant a fill gave them. The registry is keyed by the
// storage's device address and forgets a block when the allocator frees it, so a later
// allocation at the same address starts with values. Empty, every query is one relaxed load.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <atomic>
#include <cstddef>
#include <optional>

namespace torch_neuron::valueless {

extern std::atomic<size_t> g_live;  // registered storages (0: every check is one load)

inline bool any() { return g_live.load(std::memory_order_relaxed) != 0; }

// Whether `t` (a neuron tensor) reads from a valueless storage.
bool contains(const at::Tensor& t);
// The constant a valueless storage reads as (0 when no fill set one); nullopt when it has values.
std::optional<c10::Scalar> fill_of(const at::Tensor& t);
// Marks `t`'s storage valueless; its reads give `fill` (0 when unset).
void mark(const at::Tensor& t, std::optional<c10::Scalar> fill = std::nullopt);
// A write of real values to `t`: the storage has values again when `t` covers all of it.
void write_values(const at::Tensor& t);
// The allocator freed the block at `device_ptr` (or resized a storage away from it).
void forget(const void* device_ptr);
// A storage moved from `from` to `to` (resize_): the new memory keeps its state. Returns
// whether `from` was valueless.
bool moved(const void* from, const void* to);
size_t count();

}  // namespace torch_neuron::valueless
