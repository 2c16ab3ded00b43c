// SPDX-License-Identifier: GPL-2.0-only
#include "workloads/program.hpp"
