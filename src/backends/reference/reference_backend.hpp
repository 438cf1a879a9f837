// The reference backend: the definition of every epilogue (docs/conventions.md), on the CPU,
// in plain loops with double accumulation. Every other backend is tested against it.
#pragma once

#include <memory>

#include "core/backend.hpp"

namespace epigemm {

std::unique_ptr<Backend> create_reference_backend();

}  // namespace epigemm
