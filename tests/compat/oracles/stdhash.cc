// SPDX-License-Identifier: Apache-2.0
// stdhash.cc — std::hash<std::string> of each key, as libstdc++ computes it (g++, x86-64): the
// key hash of Envoy's redis_proxy, whose MurmurHash::murmurHash2 states it reproduces this
// function. rings_compat.py compiles it with g++ and feeds it keys as hex, one a line ("-" is
// the empty key); it prints each hash as 16 hex digits.
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string key;
        if (line != "-")
            for (size_t i = 0; i + 1 < line.size(); i += 2)
                key.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
        std::printf("%016llx\n", static_cast<unsigned long long>(std::hash<std::string>{}(key)));
    }
    return 0;
}
