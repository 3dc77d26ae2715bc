// Turning the OpPlan& a layer hands back into this backend's concrete plan type, with an error
// that names the op when a layer passes a plan made for another op or by another backend.
#pragma once

#include <typeinfo>

#include <fmt/format.h>

#include "kiln/backend.hpp"
#include "validate.hpp"

namespace kiln::cpu {

template <class Plan>
Plan& plan_as(const OpCheck& check, OpPlan& plan, const char* maker) {
  auto* p = dynamic_cast<Plan*>(&plan);
  if (p == nullptr) {
    check.fail(fmt::format("the plan passed was not made by the cpu backend's {}; pass the plan "
                           "this layer got from {} for the same shapes",
                           maker, maker));
  }
  return *p;
}

}  // namespace kiln::cpu
