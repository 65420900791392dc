// The nearest known word to a typo: one rule for the command line's
// unknown flags and the spec's unknown keys.
#pragma once

#include <string>
#include <vector>

namespace memrun {

/// Optimal string alignment distance: insertions, deletions,
/// substitutions and swaps of neighbours ("memroy" is one from "memory").
size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate nearest to `word`, or "" when none is near enough to be a
/// typo of it: at most 2 edits, and fewer than half the word (a command
/// line word may be a path: "gx" is no typo of "gc").
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace memrun
