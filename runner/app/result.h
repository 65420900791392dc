// How a command ended, as it returns it: main's one table (exit_code,
// runner/app/main.cc) turns a Result into memrun's exit code.
#pragma once

#include "runner/base/error.h"

namespace memrun {

class Result {
 public:
  enum class Kind {
    passed,       ///< it did its work, and every test it judged passed
    failed,       ///< a test did not pass or regressed; bisect found no limit
    stopped,      ///< an error of category() stopped it (already said)
    interrupted,  ///< a signal stopped it
    passed_on,    ///< memrun exec: its command's own ending, handed on
  };

  static Result passed() { return Result(Kind::passed); }
  static Result failed() { return Result(Kind::failed); }
  /// Ended (or never ran) as memrun ends for an error of `category`, its
  /// message already printed.
  static Result stopped(Category category) {
    Result r(Kind::stopped);
    r.category_ = category;
    return r;
  }
  static Result interrupted(int signal) {
    Result r(Kind::interrupted);
    r.signal_ = signal;
    return r;
  }
  /// A command that exited with `status`, or that `signal` ended.
  static Result passed_on(int status, int signal) {
    Result r(Kind::passed_on);
    r.status_ = status;
    r.signal_ = signal;
    return r;
  }

  Kind kind() const { return kind_; }
  Category category() const { return category_; }  ///< stopped
  int signal() const { return signal_; }            ///< interrupted, passed_on (0: none)
  int status() const { return status_; }            ///< passed_on, when no signal

 private:
  explicit Result(Kind kind) : kind_(kind) {}
  Kind kind_;
  Category category_ = Category::internal;
  int signal_ = 0;
  int status_ = 0;
};

}  // namespace memrun
