// SPDX-License-Identifier: GPL-2.0-only
// Placeholder until the platform builder lands.
