fn main() {
    std::process::exit(jb::cli::main());
}
