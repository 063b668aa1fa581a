#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <stdexcept>
#include <vector>

namespace spmd::cli {

namespace {

constexpr int kDefaultWidth = 80;
constexpr int kMinBar = 10;
constexpr int kMaxBar = 30;

std::string format(const char* fmt, auto... args) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int digits(int64_t n) {
  return static_cast<int>(std::to_string(n).size());
}

std::string bar(int64_t step, int64_t steps, int width) {
  if (step >= steps) return std::string(width, '=');
  int filled = static_cast<int>(step * width / steps);
  return std::string(filled, '=') + '>' + std::string(width - filled - 1, ' ');
}

std::string join(const std::vector<std::string>& fields) {
  std::string line;
  for (const std::string& f : fields) line += (line.empty() ? "" : "  ") + f;
  return line;
}

void check(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("[ProgressBar] " + message);
}

void validate(const ProgressOptions& o) {
  check(o.num_epochs >= 1, "num_epochs must be at least 1, got " + std::to_string(o.num_epochs));
  check(o.epoch >= 1 && o.epoch <= o.num_epochs, "epoch must be from 1 to " +
                                                     std::to_string(o.num_epochs) + ", got " +
                                                     std::to_string(o.epoch));
  check(o.steps >= 1, "steps must be at least 1, got " + std::to_string(o.steps));
  check(o.log_every >= 0, "log_every must be 0 or more, got " + std::to_string(o.log_every));
  check(o.width >= 0, "width must be 0 or more, got " + std::to_string(o.width));
  check(o.min_interval >= 0, "min_interval must be 0 or more");
  check(static_cast<bool>(o.clock), "clock must be set");
}

}  // namespace

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

int terminal_width(int fd) {
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    long n = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && n > 0 && n < 100000) return static_cast<int>(n);
  }
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return kDefaultWidth;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-:--";
  auto total = static_cast<int64_t>(std::llround(seconds));
  int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  if (h > 0) return format("%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
  return format("%lld:%02lld", (long long)m, (long long)s);
}

std::string format_rate(double value) {
  if (!std::isfinite(value) || value < 0) return "-";
  if (value < 100) return format("%.1f", value);
  return with_thousands(std::llround(value));
}

ProgressBar::ProgressBar(std::ostream& out, ProgressOptions options)
    : out_(out), options_(std::move(options)) {
  validate(options_);
  if (options_.width == 0) options_.width = terminal_width(STDOUT_FILENO);
  if (options_.log_every == 0) options_.log_every = std::max<int64_t>(1, options_.steps / 10);
  start_ = options_.clock();
}

void ProgressBar::update(double loss, int64_t samples) {
  if (finished_) throw std::logic_error("[ProgressBar] update() after finish()");
  check(step_ < options_.steps, "step " + std::to_string(step_ + 1) + " is past the epoch's " +
                                    std::to_string(options_.steps) + " steps");
  check(samples >= 1, "a step must have at least 1 sample, got " + std::to_string(samples));
  ++step_;
  samples_ += samples;
  loss_sum_ += loss * static_cast<double>(samples);
  double now = options_.clock();
  if (options_.interactive) {
    if (step_ == 1 || now - last_draw_ >= options_.min_interval) draw(now);
  } else if (step_ % options_.log_every == 0 && step_ < options_.steps) {
    log_line(now);
  }
}

void ProgressBar::finish(std::string_view extra) {
  if (finished_) throw std::logic_error("[ProgressBar] finish() called twice");
  finished_ = true;
  double now = options_.clock();
  std::vector<std::string> fields = {
      epoch_text(), format("%lld/%lld", (long long)step_, (long long)options_.steps),
      format("loss %.4f", mean_loss()), format_rate(rate(now)) + " samples/s",
      "time " + format_duration(now - start_)};
  if (!extra.empty()) fields.emplace_back(extra);
  std::string line = join(fields);
  if (options_.interactive && drawn_chars_ > 0) {
    out_ << '\r' << line
         << std::string(drawn_chars_ > line.size() ? drawn_chars_ - line.size() : 0, ' ');
  } else {
    out_ << line;
  }
  out_ << '\n' << std::flush;
}

double ProgressBar::mean_loss() const {
  return samples_ == 0 ? std::nan("") : loss_sum_ / static_cast<double>(samples_);
}

std::string ProgressBar::epoch_text() const {
  return format("epoch %*d/%d", digits(options_.num_epochs), options_.epoch, options_.num_epochs);
}

double ProgressBar::rate(double now) const {
  double elapsed = now - start_;
  return elapsed > 0 ? static_cast<double>(samples_) / elapsed : std::nan("");
}

std::vector<std::string> ProgressBar::step_fields(double now) const {
  double elapsed = now - start_;
  double eta = elapsed > 0 ? elapsed / static_cast<double>(step_) *
                                 static_cast<double>(options_.steps - step_)
                           : std::nan("");
  return {format("%*lld/%lld", digits(options_.steps), (long long)step_, (long long)options_.steps),
          format("loss %.4f", mean_loss()), format_rate(rate(now)) + " samples/s",
          "ETA " + format_duration(eta)};
}

// The full line when it fits; else the bar goes first, then the rate, the ETA and the loss, and
// what is left is cut at the width. The last column stays free: writing there makes some
// terminals wrap.
std::string ProgressBar::fitted_line(double now) const {
  std::vector<std::string> fields = step_fields(now);
  size_t max_chars = static_cast<size_t>(std::max(1, options_.width - 1));
  std::string head = epoch_text();
  int room = static_cast<int>(max_chars) - static_cast<int>(head.size() + 4 + join(fields).size());
  if (room >= kMinBar) {
    return head + " [" + bar(step_, options_.steps, std::min(room, kMaxBar)) + "] " + join(fields);
  }
  for (int drop : {2, 2, 1}) {
    std::string line = head + "  " + join(fields);
    if (line.size() <= max_chars) return line;
    fields.erase(fields.begin() + drop);
  }
  std::string line = (head + "  " + join(fields)).substr(0, max_chars);
  return line.erase(line.find_last_not_of(' ') + 1);
}

void ProgressBar::draw(double now) {
  std::string line = fitted_line(now);
  out_ << '\r' << line;
  if (drawn_chars_ > line.size()) out_ << std::string(drawn_chars_ - line.size(), ' ');
  out_ << std::flush;
  drawn_chars_ = std::max(drawn_chars_, line.size());
  last_draw_ = now;
}

void ProgressBar::log_line(double now) {
  out_ << epoch_text() << "  " << join(step_fields(now)) << '\n' << std::flush;
}

}  // namespace spmd::cli
