import Test.Hspec

import qualified SessionSpec
import qualified VectorsSpec

main :: IO ()
main = hspec $ do
  describe "vectors" VectorsSpec.spec
  describe "session (against a fake core)" SessionSpec.spec
