// One config field's value in YAML, for each type a field can have: read with errors that name
// the key, written back so that it reads again (the run's config.yaml), and its type named for
// docs/config.md. The config's visitors (config.cpp) call these by overload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"

namespace YAML {
class Node;
}

namespace autoloco::yaml_values {

const char* type_name(const int64_t&);
const char* type_name(const double&);
const char* type_name(const bool&);
const char* type_name(const std::string&);
const char* type_name(const std::vector<double>&);
const char* type_name(const std::vector<std::string>&);
const char* type_name(const std::vector<DataSource>&);
const char* type_name(const std::vector<EvalTask>&);

// A node as an error message shows it: a scalar quoted, else what kind of node it is.
std::string describe(const YAML::Node& node);

// `key` is the dotted name errors give ("data.sources[1].weight"); ConfigError on a wrong type.
void read_value(const YAML::Node& n, const std::string& key, int64_t& out);
void read_value(const YAML::Node& n, const std::string& key, double& out);
void read_value(const YAML::Node& n, const std::string& key, bool& out);
void read_value(const YAML::Node& n, const std::string& key, std::string& out);
void read_value(const YAML::Node& n, const std::string& key, std::vector<double>& out);
void read_value(const YAML::Node& n, const std::string& key, std::vector<std::string>& out);
void read_value(const YAML::Node& n, const std::string& key, std::vector<DataSource>& out);
void read_value(const YAML::Node& n, const std::string& key, std::vector<EvalTask>& out);

std::string format_value(const int64_t& v);
std::string format_value(const double& v);
std::string format_value(const bool& v);
std::string format_value(const std::string& v);
std::string format_value(const std::vector<double>& v);
std::string format_value(const std::vector<std::string>& v);
std::string format_value(const std::vector<DataSource>& v);
std::string format_value(const std::vector<EvalTask>& v);

}  // namespace autoloco::yaml_values
