// What the SVG tests share (render_svg_test.cpp, render_memory_test.cpp):
// reading the picture back, its tags, their attributes and whether it is
// well formed.
#pragma once

#include <catch2/catch.hpp>
#include <cctype>
#include <string>
#include <vector>

#include "tests/traces/render_test_support.h"

namespace pplab {

// Value of a numeric attribute in one tag, e.g. Attr("<rect x=\"3.00\" ...", "x") == 3.
inline double Attr(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t pos = tag.find(key);
  REQUIRE(pos != std::string::npos);
  return std::stod(tag.substr(pos + key.size()));
}

// The opening tags of every element that starts with `prefix`, in document order.
inline std::vector<std::string> Tags(const std::string& svg, const std::string& prefix) {
  std::vector<std::string> tags;
  for (size_t pos = svg.find(prefix); pos != std::string::npos; pos = svg.find(prefix, pos + 1)) {
    tags.push_back(svg.substr(pos, svg.find('>', pos) - pos));
  }
  return tags;
}

// First well-formedness problem of an XML document as the renderer writes it
// (elements, attributes, text; no comments or CDATA), or "" when there is none.
inline std::string XmlProblem(const std::string& xml) {
  for (size_t pos = xml.find('&'); pos != std::string::npos; pos = xml.find('&', pos + 1)) {
    bool known = false;
    for (const char* entity : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
      known = known || xml.compare(pos, std::string(entity).size(), entity) == 0;
    }
    if (!known) return "bare '&' at " + std::to_string(pos);
  }
  std::vector<std::string> open;
  int roots = 0;
  for (size_t i = 0; i < xml.size(); ++i) {
    if (xml[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return "text outside the root at " + std::to_string(i);
      }
      continue;
    }
    const size_t close = xml.find('>', i);
    if (close == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = xml.substr(i + 1, close - i - 1);
    if (tag.find('<') != std::string::npos || CountOf(tag, "\"") % 2 != 0) return "bad tag <" + tag + ">";
    if (tag.empty()) return "empty tag at " + std::to_string(i);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "unexpected </" + tag.substr(1) + ">";
      open.pop_back();
    } else {
      const std::string name = tag.substr(0, tag.find_first_of(" /"));
      if (open.empty() && ++roots > 1) return "second root <" + name + ">";
      if (tag.back() != '/') open.push_back(name);
    }
    i = close;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "no root element";
}

}  // namespace pplab
