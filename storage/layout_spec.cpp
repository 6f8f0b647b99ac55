// Implementation of storage/layout_spec.h.
#include "storage/layout_spec.h"

#include <type_traits>

#include "core/error.h"

namespace pg {

namespace {
// Checks a slot count against the range MemoryConfig declares for memory.slots.
struct SlotsRangeCheck {
  int64_t slots;
  std::string where;
  template <class T, class C = cfg::NoCheck>
  void operator()(const char* key, T&, const char* help, const C& c = C{}) {
    if constexpr (std::is_same_v<C, cfg::Range>)
      if (std::string(key) == "slots") cfg::check(slots, c, where, "memory.slots", help);
  }
};
// "flat, engram, pagegram or pagegram:S": the registry's names, and the form that takes slots.
std::string layout_choices_hint() {
  std::string names, slotted;
  for (const std::string& n : layout_names()) {
    names += str(names.empty() ? "" : ", ", n);
    if (layout_takes_slots(n)) slotted += str(" or ", n, ":S");
  }
  return names + slotted;
}
}  // namespace

std::string FlashLayoutSpec::label() const { return layout_label(layout, slots); }

FlashLayoutSpec parse_flash_layout(const std::string& text, int64_t default_slots) {
  FlashLayoutSpec s;
  const size_t colon = text.find(':');
  s.layout = text.substr(0, colon);
  if (!is_layout_name(s.layout))
    throw UserError(str("--layouts: unknown layout '", text, "' (hint: ", layout_choices_hint(), ")"));
  s.slots = default_slots;
  if (colon != std::string::npos) {
    if (!layout_takes_slots(s.layout))
      throw UserError(
          str("--layouts: '", text, "': '", s.layout, "' has no slots (hint: ", layout_choices_hint(), ")"));
    try {
      size_t pos = 0;
      s.slots = std::stoll(text.substr(colon + 1), &pos);
      if (pos != text.size() - colon - 1) throw 0;
    } catch (...) {
      throw UserError(str("--layouts: '", text, "': slots after ':' must be an integer (e.g. pagegram:15)"));
    }
    MemoryConfig m;
    SlotsRangeCheck check{s.slots, str("--layouts '", text, "'")};
    m.visit(check);
  }
  if (!layout_takes_slots(s.layout)) s.slots = 0;
  return s;
}

std::unique_ptr<MemoryLayout> make_storage_layout(const MemoryConfig& base, int64_t d_model,
                                                  const FlashLayoutSpec& spec, double params,
                                                  const CompressedVocab* vocab) {
  MemoryConfig m = base;
  m.layout = spec.layout;
  if (layout_takes_slots(spec.layout) && spec.slots > 0) m.slots = spec.slots;
  if (params > 0) m.target_params = static_cast<int64_t>(params);
  if (!vocab) m.hash.engram_faithful = false;
  return make_layout(m, d_model, vocab);
}

std::unique_ptr<MemoryLayout> make_storage_layout(const MemoryConfig& base, int64_t d_model,
                                                  const FlashLayoutSpec& spec, double params,
                                                  const std::vector<std::string>& pieces) {
  MemoryConfig m = base;
  m.layout = spec.layout;
  const auto vocab = engram_vocab(m, pieces);
  return make_storage_layout(base, d_model, spec, params, vocab.get());
}

}  // namespace pg
