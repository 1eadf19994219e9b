-- | Every vector of proto/vectors: decoded into its message (every field
-- compared) and encoded back to the same bytes; every invalid one rejected
-- with the status it names.
module VectorsSpec (spec, vectorsDir, unhex) where

import qualified Data.ByteString as B
import Data.Char (digitToInt)
import Data.List (isSuffixOf, sort)
import qualified Data.Text as T
import qualified Data.Text.Encoding as TE
import System.Directory (doesDirectoryExist, getDirectoryContents)
import System.Environment (lookupEnv)
import System.FilePath ((</>))
import Test.Hspec

import Cumulo (errorStatus, infoEncode, infoParse, statusName)
import Cumulo.Codec
import Json

-- | proto/vectors, from the package folder (cabal runs the tests there) or CUMULO_VECTORS.
vectorsDir :: IO FilePath
vectorsDir = lookupEnv "CUMULO_VECTORS" >>= maybe (pure "../../proto/vectors") pure

unhex :: String -> B.ByteString
unhex (a : b : rest) = B.cons (fromIntegral (digitToInt a * 16 + digitToInt b)) (unhex rest)
unhex _ = B.empty

loadFamilies :: IO [(FilePath, Json)]
loadFamilies = do
  dir <- vectorsDir
  ok <- doesDirectoryExist dir
  if not ok then error ("no vectors at " ++ dir) else pure ()
  files <- sort . filter (".json" `isSuffixOf`) <$> getDirectoryContents dir
  mapM (\f -> do
          raw <- B.readFile (dir </> f)
          either (error . show) (\j -> pure (f, j)) (parseJson (T.unpack (TE.decodeUtf8 raw)))) files

spec :: Spec
spec = do
  families <- runIO loadFamilies
  it "finds the six families of vectors" $ map fst families `shouldBe`
    ["control.json", "handshake.json", "kv.json", "lifecycle.json", "return.json", "send.json"]
  mapM_ family families

family :: (FilePath, Json) -> Spec
family (file, json)
  | file == "kv.json" = describe file $ do
      mapM_ kvVector (list (json .: "vectors"))
      mapM_ (\v -> it ("rejects " ++ str (v .: "name")) $
                either (statusName . errorStatus) (const (T.pack "accepted")) (infoParse (unhex (str (v .: "hex"))))
                  `shouldBe` T.pack (str (v .: "error"))) (list (json .: "invalid"))
  | otherwise = describe file $ do
      mapM_ frameVector (list (json .: "vectors"))
      mapM_ invalid (list (json .: "invalid"))

kvVector :: Json -> Spec
kvVector v = do
  let bytes = unhex (str (v .: "hex"))
      pairs = [(utf8 (str k), utf8 (str x)) | JArr [k, x] <- list (v .: "pairs")]
  it ("parses " ++ str (v .: "name")) $ infoParse bytes `shouldBe` Right pairs
  it ("encodes " ++ str (v .: "name")) $ infoEncode pairs `shouldBe` bytes

frameVector :: Json -> Spec
frameVector v = do
  let bytes = unhex (str (v .: "hex"))
      expected = message (str (v .: "type")) (v .: "fields")
  it ("decodes " ++ str (v .: "name")) $
    fmap (fmap fst) (decodeFrame maxBound bytes) `shouldBe` Right (Just expected)
  it ("decodes " ++ str (v .: "name") ++ " to its end") $
    fmap (fmap snd) (decodeFrame maxBound bytes) `shouldBe` Right (Just B.empty)
  it ("encodes " ++ str (v .: "name")) $ encode expected `shouldBe` bytes

invalid :: Json -> Spec
invalid v = it ("rejects " ++ str (v .: "name")) $ do
  let result = decodeMessage 1024 (unhex (str (v .: "hex")))
  either (statusName . errorStatus) (const (T.pack "accepted")) result `shouldBe` T.pack (str (v .: "error"))

utf8 :: String -> B.ByteString
utf8 = TE.encodeUtf8 . T.pack

message :: String -> Json -> Message
message typ f = case typ of
  "HELLO" -> MHello (Hello (int (f .: "version")) (int (f .: "window")) (int (f .: "thread_index")) (text "token") (text "prefix"))
  "SUBSCRIBE" -> MSubscribe control
  "UNSUBSCRIBE" -> MUnsubscribe control
  "SUBSCRIBE_COUNT" -> MSubscribeCount control
  "SEND_ASYNC" -> MSendAsync send
  "SEND_SYNC" -> MSendSync send
  "MCAST_ASYNC" -> MMcastAsync send
  "FORWARD" -> MForward send
  "RETURN" -> MReturn answer
  "PING" -> MPing (int (f .: "nonce"))
  "PONG" -> MPong (int (f .: "nonce"))
  "GOODBYE" -> MGoodbye
  "WELCOME" -> MWelcome (Welcome (int (f .: "version")) (int (f .: "node_id")) (int (f .: "instance_id"))
    (int (f .: "process_index")) (int (f .: "process_count")) (int (f .: "thread_count")) (int (f .: "window"))
    (int (f .: "max_frame")) (int (f .: "timeout_async")) (int (f .: "timeout_sync"))
    (int (f .: "timeout_terminate")) (int (f .: "priority_default")) (int (f .: "keepalive")) (text "prefix"))
  "REQUEST" -> MRequest (Request (tid "trans_id") (int (f .: "timeout")) (int (f .: "priority")) (int (f .: "flags"))
    (int (f .: "source")) (text "name") (text "pattern") (hex "request_info") (hex "request"))
  "RESPONSE" -> MResponse answer
  "REPLY" -> MReply (Reply (int (f .: "req_id")) (int (f .: "status")) (int (f .: "value")) (text "message"))
  "MCAST_SENT" -> MMcastSent (McastSent (tid "trans_id") [TransId (unhex (str t)) | t <- list (f .: "trans_ids")])
  "TERMINATE" -> MTerminate (int (f .: "timeout"))
  "ERROR" -> MError (int (f .: "status")) (text "message")
  other -> error ("unknown vector type " ++ other)
  where
    text k = T.pack (str (f .: k))
    hex k = unhex (str (f .: k))
    tid k = TransId (hex k)
    control = Control (int (f .: "req_id")) (text "pattern")
    send = Send (tid "trans_id") (int (f .: "timeout")) (int (f .: "priority")) (int (f .: "flags"))
      (text "name") (hex "request_info") (hex "request")
    answer = Answer (tid "trans_id") (int (f .: "status")) (hex "response_info") (hex "response")
