// Enums that Python passes by name: each has a table of its values and their
// names, and these convert both ways with the same message for a bad name.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace ppb {

// An enum's table: std::pair<E, const char*> table[] = {{E::a, "a"}, ...}.
template <class E, size_t N>
using EnumNames = std::pair<E, const char*>[N];

template <class E, size_t N>
const char* enum_name(const EnumNames<E, N>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  throw std::invalid_argument("no name for enum value " + std::to_string(static_cast<int>(value)));
}

// The value called `name`; std::invalid_argument "<what> must be 'a', 'b' or
// 'c', got '<name>'", with `other` as a last choice that is not a name.
template <class E, size_t N>
E enum_value(const EnumNames<E, N>& names, const char* what, const std::string& name,
             const char* other = nullptr) {
  for (const auto& [v, known] : names)
    if (name == known) return v;
  const size_t count = N + (other ? 1 : 0);
  std::string valid;
  for (size_t i = 0; i < count; ++i) {
    valid += i == 0 ? "" : i + 1 == count ? " or " : ", ";
    valid += i < N ? std::string("'") + names[i].second + "'" : std::string(other);
  }
  throw std::invalid_argument(std::string(what) + " must be " + valid + ", got '" + name + "'");
}

}  // namespace ppb
