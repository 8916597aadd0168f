import RelayServer
import ArgumentParser
print(RelayServerVersion.string)
