// SPDX-License-Identifier: GPL-2.0-only
int main() { return 0; }
